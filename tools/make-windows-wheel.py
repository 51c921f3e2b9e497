#!/usr/bin/env python3
"""make-windows-wheel.py GSB_DLL OUT_DIR - the Windows wheel of the Python package.

A Windows user needs only Python and numpy/scikit-learn: the wheel carries the
pure-Python package (python/gsb), the client library gsb.dll (cross-compiled
with mingw-w64, remote sessions only: it talks to a gsbd, e.g. the one in WSL2)
and the WSL2 helper scripts.  Tagged py3-none-win_amd64 (ctypes, no C API).
The version is read from include/gsb.h, like every other build.
"""
import base64
import hashlib
import os
import re
import sys
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def version():
    text = open(os.path.join(ROOT, "include", "gsb.h")).read()
    return re.search(r'#define GSB_VERSION_STRING "([^"]+)"', text).group(1)


def record_line(name, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__.strip().splitlines()[0])
    dll, out_dir = sys.argv[1], sys.argv[2]
    v = version()
    files = []  # (name in the wheel, bytes)
    pkg = os.path.join(ROOT, "python", "gsb")
    for name in sorted(os.listdir(pkg)):
        if name.endswith(".py"):
            files.append((f"gsb/{name}", open(os.path.join(pkg, name), "rb").read()))
    files.append(("gsb/gsb.dll", open(dll, "rb").read()))
    scripts = os.path.join(ROOT, "scripts", "windows")
    for name in sorted(os.listdir(scripts)):
        files.append((f"gsb/scripts/windows/{name}", open(os.path.join(scripts, name), "rb").read()))
    info = f"gsb-{v}.dist-info"
    files.append((f"{info}/METADATA", (
        f"Metadata-Version: 2.1\nName: gsb\nVersion: {v}\n"
        "Summary: gpu-sklearn-bridge client for Windows: scikit-learn-style estimators "
        "on a gsbd server (WSL2 or another machine)\n"
        "Requires-Python: >=3.9\nRequires-Dist: numpy>=1.22\n"
        "Requires-Dist: scikit-learn>=1.3\n").encode()))
    files.append((f"{info}/WHEEL", (
        "Wheel-Version: 1.0\nGenerator: gsb make-windows-wheel\nRoot-Is-Purelib: false\n"
        "Tag: py3-none-win_amd64\n").encode()))
    files.append((f"{info}/entry_points.txt",
                  b"[console_scripts]\n"))  # gsbd runs in Linux/WSL2, not here
    record = [record_line(n, d) for n, d in files] + [f"{info}/RECORD,,"]
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, f"gsb-{v}-py3-none-win_amd64.whl")
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for n, d in files:
            z.writestr(n, d)
        z.writestr(f"{info}/RECORD", "\n".join(record) + "\n")
    print(path)


if __name__ == "__main__":
    main()
