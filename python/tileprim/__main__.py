"""``python -m tileprim demo`` runs the seeds' demonstration programs; ``python -m tileprim info``
prints what this installation can do."""
import json
import sys


def main(argv) -> int:
    command = argv[1] if len(argv) > 1 else "demo"
    if command == "demo":
        from .demo import main as demo
        return demo()
    if command == "info":
        from . import info
        print(json.dumps(info(), indent=2))
        return 0
    print(f"usage: python -m tileprim [demo|info]  (unknown command {command!r})", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
