from salon.cli import main

raise SystemExit(main())
