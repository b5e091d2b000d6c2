import sys

from grace.cli import main

sys.exit(main())
