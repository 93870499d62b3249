import sys

from medic_cli.main import main

sys.exit(main())
