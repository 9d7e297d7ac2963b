"""What bench/instructions and bench/alloctime share: bench/run as a module,
which objects are each allocator's code, and the real programs they run."""
import importlib.machinery
import importlib.util
import os
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def _load_run():
    loader = importlib.machinery.SourceFileLoader("bench_run", os.path.join(HERE, "run"))
    spec = importlib.util.spec_from_loader("bench_run", loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


# bench/run: its allocators, environment and workload files.
RUN = _load_run()

# Object basenames whose code is the allocator (glibc: only its malloc code
# inside libc; each tool says how it tells that code apart).
ALLOCATOR_OBJECTS = {
    "glibc": ["libc.so.6"],
    "jemalloc": ["libjemalloc.so.2"],
    "memtier": ["libmemtier.so", "libmemkind.so"],
    "tiermalloc": ["libtiermalloc.so"],
}


def split_costs(key, costs, in_glibc_malloc):
    """(the allocator's, ld.so's) share of costs, {(object path or basename,
    detail): count}: the counts in key's objects (glibc: only those whose
    detail in_glibc_malloc accepts), and those in the dynamic linker."""
    mine = ldso = 0
    for (obj, detail), n in costs.items():
        base = os.path.basename(obj)
        if base.startswith("ld-linux"):
            ldso += n
        if any(base.startswith(o) for o in ALLOCATOR_OBJECTS[key]) and (key != "glibc" or in_glibc_malloc(detail)):
            mine += n
    return mine, ldso


def allocators(lib):
    """bench/run's allocators that have an ALLOCATOR_OBJECTS entry."""
    return [a for a in RUN.allocators(lib) if a.key in ALLOCATOR_OBJECTS]


def work(tmp, sql_rows, py_scale):
    """The real programs, as (key, title, argv, stdin path or None, extra env);
    sqlite only where sqlite3 is installed. Files go to tmp."""
    python, sqlite = RUN.find_python(), RUN.find_sqlite()
    out = []
    if sqlite:
        sql = os.path.join(tmp, "work.sql")
        RUN.write_sql(sql, sql_rows)
        out.append(("sqlite", "sqlite3 :memory:, %d rows" % sql_rows, [sqlite, ":memory:"], sql, {}))
    out.append(("python", "CPython, PYTHONMALLOC=malloc, pywork scale %d" % py_scale,
                [python, os.path.join(HERE, "pywork.py"), str(py_scale), os.path.join(tmp, "py.out")],
                None, {"PYTHONMALLOC": "malloc"}))
    return out


def add_args(ap, sql_rows, out_name):
    """The options both tools take: --lib, --sql-rows, --py-scale, --out, --no-write."""
    root = os.path.dirname(HERE)
    ap.add_argument("--lib", default=os.path.join(root, "build", "libtiermalloc.so"))
    ap.add_argument("--sql-rows", type=int, default=sql_rows)
    ap.add_argument("--py-scale", type=int, default=1)
    ap.add_argument("--out", default=os.path.join(HERE, "results", out_name))
    ap.add_argument("--no-write", action="store_true")


def ready(me, tool, package, lib):
    """The library's absolute path when `tool` is installed and the library
    built; else None, having said which is missing."""
    if not shutil.which(tool):
        print("%s: %s is not installed (apt-get install %s)" % (me, tool, package), file=sys.stderr)
        return None
    lib = os.path.abspath(lib)
    if not os.path.exists(lib):
        print("%s: %s is missing (run make)" % (me, lib), file=sys.stderr)
        return None
    return lib


def tm_ratios(value):
    """memtier/tm, tm/jemalloc and tm/glibc cells from {allocator: figure}."""
    tm = value.get("tiermalloc")
    if not tm:
        return ["", "", ""]
    cell = lambda x: "%.2fx" % x if x else ""
    return [cell(value.get("memtier", 0) / tm), cell(tm / value["jemalloc"] if value.get("jemalloc") else 0),
            cell(tm / value["glibc"] if value.get("glibc") else 0)]


def publish(text, args):
    """Prints the results and, unless --no-write, writes them to --out."""
    print(text)
    if not args.no_write:
        os.makedirs(os.path.dirname(args.out), exist_ok=True)
        with open(args.out, "w") as f:
            f.write(text)
        print("wrote %s" % os.path.relpath(args.out, os.path.dirname(HERE)), file=sys.stderr)
