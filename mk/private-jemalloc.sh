#!/bin/sh
# Builds the private jemalloc: usage: private-jemalloc.sh libjemalloc_pic.a OUTDIR
# Extracts Debian's PIC archive, drops the C++ operator new/delete object (the
# shim defines those), renames every public (non je_) symbol to tmje_<name>,
# routes its mmap/munmap through tiermalloc, and archives the result as OUTDIR/libtmje.a.
set -eu
pic=$1 out=$2
[ -f "$pic" ] || { echo "private-jemalloc: $pic not found (install libjemalloc-dev: make deps)" >&2; exit 1; }
rm -rf "$out/obj" && mkdir -p "$out/obj"
cd "$out/obj"
ar x "$pic"
rm -f jemalloc_cpp.pic.o
nm -g --defined-only ./*.o | awk 'NF==3 && $3 !~ /^je_/ {print $3" tmje_"$3}' | sort -u > ../renames
for o in ./*.o; do objcopy --redefine-syms=../renames "$o"; done
# jemalloc's own mmap/munmap (its metadata, and extents made before the
# extent hooks were installed) go through allocator/jemap.c, which records
# them: tiermalloc can then tell jemalloc's memory outside the tier ranges
# from glibc's.
objcopy --redefine-sym mmap=tmje_os_mmap --redefine-sym munmap=tmje_os_munmap pages.pic.o
rm -f ../libtmje.a && ar rcs ../libtmje.a ./*.o
