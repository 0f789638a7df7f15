"""python -m trident: the versions (Trident, Python, NumPy and torch where present) and the devices here."""
import platform
import sys

import trident


def main():
    print(f"trident {trident.__version__} ({trident.__file__})")
    print(f"python {platform.python_version()} ({sys.executable})")
    for mod in ("numpy", "torch"):
        try:
            print(f"{mod} {__import__(mod).__version__}")
        except ImportError:
            print(f"{mod}: not installed")
    print("devices:", ", ".join(trident.devices()))


if __name__ == "__main__":
    main()
