"""Sub-commands beyond import/info, registered with :func:`crosstune.cli.command`."""
