"""bench/pywork.py: an allocation-heavy CPython workload for bench/run.

    PYTHONMALLOC=malloc python3 bench/pywork.py [scale] [result-file]

Builds and sorts a list of tuples, groups records into dicts of lists,
builds and splits strings, and round-trips the lot through json. Every
object goes through malloc because of PYTHONMALLOC=malloc. Prints one
digest line; with result-file, also writes that line there and fsyncs it
(memkind's memtier can turn stdout into NUL bytes at exit, a file it
fsyncs survives).
"""
import hashlib
import json
import os
import sys


def lcg(seed):
    x = seed
    while True:
        x = (x * 6364136223846793005 + 1442695040888963407) & 0xFFFFFFFFFFFFFFFF
        yield x >> 33


def work(scale):
    h = hashlib.sha256()
    r = lcg(12345)
    n = 60000 * scale

    # A list of tuples, sorted two ways.
    rows = [(next(r) % 1000, "k%07d" % next(r), next(r) / 7.0) for _ in range(n)]
    rows.sort()
    h.update(repr(rows[:50]).encode())
    rows.sort(key=lambda t: (t[1], -t[0]))
    h.update(repr(rows[-50:]).encode())

    # Dicts of lists and nested dicts.
    groups = {}
    for g, name, v in rows:
        groups.setdefault(g, []).append({"name": name, "v": round(v, 3), "tags": [name[:3], name[-2:]]})
    summary = {str(g): {"n": len(lst), "first": lst[0]["name"], "sum": round(sum(d["v"] for d in lst), 3)}
               for g, lst in groups.items()}
    h.update(json.dumps(summary, sort_keys=True).encode())

    # Strings: join, split, replace, format.
    text = " ".join("%s=%d" % (name, g) for g, name, _ in rows)
    words = text.split(" ")
    counts = {}
    for w in words:
        key = w.split("=")[1]
        counts[key] = counts.get(key, 0) + 1
    h.update(repr(sorted(counts.items())[:100]).encode())
    h.update(text.replace("k0", "K").upper()[:10000].encode())

    # A json round trip of the grouped data.
    blob = json.dumps(groups)
    groups = {int(k): v for k, v in json.loads(blob).items()}
    h.update(hashlib.sha256(blob.encode()).digest())

    # Set and dict churn with short-lived objects.
    seen = set()
    for i in range(n):
        seen.add((i % 5000, str(i % 777)))
        if len(seen) > 3000:
            seen = set(sorted(seen)[::2])
    h.update(repr(sorted(seen)[:20]).encode())
    return "pywork: scale %d, %d rows, digest %s" % (scale, n, h.hexdigest()[:32])


def main():
    scale = int(sys.argv[1]) if len(sys.argv) > 1 else 1
    line = work(scale)
    if len(sys.argv) > 2:
        fd = os.open(sys.argv[2], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.write(fd, (line + "\n").encode())
        os.fsync(fd)
        os.close(fd)
    print(line)


if __name__ == "__main__":
    main()
