import sys

from medic_agent.eks.main import main

sys.exit(main())
