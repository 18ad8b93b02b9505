"""The commands behind the command line, one module each, each with its frozen options record: `run` (the default),
`ask`, `context`, `index`, `recover` and `undo`; `parts` builds what several of them share. cli.py holds the table
that parses arguments into Settings and these records; nothing here sees argparse."""
