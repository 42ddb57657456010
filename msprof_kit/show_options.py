"""The options of `msprof-kit show` that its command line names before anything is shown: kept
apart from show.py so that building the command line does not import the readers of exported
files (every command builds the whole command line)."""

DEFAULT_TOP = 20
FORMATS = ("table", "csv", "json")
