from salon.launch import main

raise SystemExit(main())
