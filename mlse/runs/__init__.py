"""What a job keeps on disk: run folders and their health, the job lock, the stop signal, result files and their
index, the shipped artifacts (one module each; import from the module that defines a name)."""
