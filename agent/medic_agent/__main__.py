import sys

from medic_agent.main import main

sys.exit(main())
