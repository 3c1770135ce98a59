import sys

from mlse.cli import main

sys.exit(main())
