import sys

from mlse.cli.main import main

sys.exit(main())
