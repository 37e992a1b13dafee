"""python -m bwdconv: the doctor (bwdconv.doctor)."""

from .doctor import main

raise SystemExit(main())
