#!/usr/bin/env python3
"""Turns the classpath `lein with-profile +bench classpath` prints into the one the bench's
servers start with, fixed for the whole run.

1. Debian's jars (ring-jetty-adapter, ring-servlet, and the ring-core 1.8.2 the :dev profile
   takes from /usr/share/maven-repo) carry manifest `Class-Path:` entries such as
   /usr/share/java/clojure.jar. The JVM searches those right after the jar that names them,
   so Debian's Clojure 1.11 (and whatever its own manifest names) would shadow the Maven
   Central jars lein resolved. Each jar with a `Class-Path` attribute is replaced by a copy
   without it, in LIB_DIR.
2. Directories (src/, bench/src/, target/bench/classes, ...) are copied into SNAPSHOT_DIR, so
   a run measures the code as it was when it was built even while src/ is being edited: each
   server JVM loads the Clojure sources afresh, and the Java classes were compiled once.
   The test directory is left out; directories that do not exist are dropped.

Usage: classpath.py CLASSPATH_FILE ROOT LIB_DIR SNAPSHOT_DIR > bench.cp
"""
import hashlib
import os
import shutil
import sys
import zipfile


def manifest_without_class_path(text):
    """The manifest with its Class-Path attribute (and continuation lines) removed, or None
    when it has none."""
    lines = text.replace("\r\n", "\n").split("\n")
    out, skipping, found = [], False, False
    for line in lines:
        if skipping and line.startswith(" "):
            continue
        skipping = line.lower().startswith("class-path:")
        if skipping:
            found = True
            continue
        out.append(line)
    return "\r\n".join(out) if found else None


def strip(jar, lib_dir):
    try:
        with zipfile.ZipFile(jar) as z:
            try:
                manifest = z.read("META-INF/MANIFEST.MF").decode("utf-8", "replace")
            except KeyError:
                return jar
            stripped = manifest_without_class_path(manifest)
            if stripped is None:
                return jar
            tag = hashlib.sha1(jar.encode()).hexdigest()[:8]
            dest = os.path.join(lib_dir, tag + "-" + os.path.basename(jar))
            if os.path.exists(dest) and os.path.getmtime(dest) >= os.path.getmtime(jar):
                return dest
            tmp = dest + ".tmp"
            with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as w:
                for info in z.infolist():
                    data = z.read(info.filename)
                    if info.filename == "META-INF/MANIFEST.MF":
                        data = stripped.encode("utf-8")
                    w.writestr(info, data)
            os.replace(tmp, dest)
            print("classpath: dropped the manifest Class-Path of " + jar, file=sys.stderr)
            return dest
    except zipfile.BadZipFile:
        return jar


def snapshot(directory, index, root, snap_dir):
    rel = os.path.relpath(directory, root)
    dest = os.path.join(snap_dir, "%02d-%s" % (index, rel.replace(os.sep, "_")))
    shutil.copytree(directory, dest, ignore=shutil.ignore_patterns("*.java", "*.tmp", ".#*"))
    return dest


def main():
    cp_file, root, lib_dir, snap_dir = sys.argv[1:5]
    root = os.path.realpath(root)
    os.makedirs(lib_dir, exist_ok=True)
    shutil.rmtree(snap_dir, ignore_errors=True)
    os.makedirs(snap_dir)
    with open(cp_file) as f:
        entries = [e for e in f.read().strip().split(":") if e]
    out = []
    for i, e in enumerate(entries):
        if e.endswith(".jar"):
            out.append(strip(e, lib_dir))
        elif os.path.isdir(e):
            if os.path.realpath(e) == os.path.join(root, "test"):
                continue
            out.append(snapshot(e, i, root, snap_dir))
        elif os.path.exists(e):
            out.append(e)
    print(":".join(out))


if __name__ == "__main__":
    main()
