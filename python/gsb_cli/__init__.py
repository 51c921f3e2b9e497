"""The `gsb` and `gsbd` commands of a pip install.

The commands are C programs (src/cli, src/gsbd) that the wheel carries in
gsb/bin beside libgsb.so; these console-script entry points replace the Python
process with them, so flags, exit codes and signals are the programs' own.  With
the programs beside each other, `gsb service install` finds this gsbd for its
systemd unit.  This launcher is a package of its own so that a command does not
pay for importing gsb (numpy, scikit-learn): it only looks up where gsb is.  A
package without the programs (one built without the CLI) still has gsbd as
gsb.server's Python main; `gsb` then says how to get the command.
"""
import importlib.util
import os
import sys


def _bin_dir():
    spec = importlib.util.find_spec("gsb")  # finds the package without running it
    paths = list(spec.submodule_search_locations or []) if spec else []
    return os.path.join(paths[0], "bin") if paths else None


def _program(name):
    folder = _bin_dir()
    if folder is None:
        return None
    path = os.path.join(folder, name + (".exe" if os.name == "nt" else ""))
    return path if os.path.isfile(path) and os.access(path, os.X_OK) else None


def _exec(path, name):
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(path, [name] + sys.argv[1:])


def gsb():
    path = _program("gsb")
    if path is None:
        print("gsb: this installation of the gsb package has no gsb program (gsb/bin/gsb); "
              "build it with CMake (`cmake -S . -B build && cmake --build build`) or "
              "reinstall the package from its sources with pip", file=sys.stderr)
        return 127
    _exec(path, "gsb")


def gsbd():
    path = _program("gsbd")
    if path is None:
        from gsb.server import main
        return main()
    _exec(path, "gsbd")
