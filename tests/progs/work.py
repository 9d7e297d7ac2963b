# A deterministic allocation-heavy Python workload for the preload tests:
# dicts, lists, strings, json, sorting, big integers and a few threads. Its
# output depends only on its own computations (run with PYTHONHASHSEED=0),
# so it must be byte-identical under any allocator.
import hashlib
import json
import threading


def lcg(seed):
    x = seed
    while True:
        x = (x * 6364136223846793005 + 1442695040888963407) % (1 << 64)
        yield x >> 29


def words(seed, n):
    g = lcg(seed)
    alphabet = "abcdefghijklmnopqrstuvwxyz"
    out = []
    for _ in range(n):
        v = next(g)
        out.append("".join(alphabet[(v >> (5 * i)) % 26] for i in range(3 + v % 9)))
    return out


def churn(seed, n):
    g = lcg(seed)
    d = {}
    lists = []
    for i in range(n):
        v = next(g)
        k = "key%d" % (v % 3000)
        d.setdefault(k, []).append(v % 1000)
        if len(d[k]) > 30:
            del d[k][:15]
        if v % 5 == 0:
            lists.append([str(v)] * (v % 20))
        if len(lists) > 200:
            lists = lists[100:]
        if v % 97 == 0:
            d.pop("key%d" % ((v >> 12) % 3000), None)
    h = hashlib.sha256()
    for k in sorted(d):
        h.update(k.encode())
        h.update(bytes(x % 256 for x in d[k]))
    h.update(str(sum(len(x) for x in lists)).encode())
    return h.hexdigest()[:16]


def main():
    ws = words(1, 60000)
    ws_sorted = sorted(ws)
    by_len = sorted(ws, key=lambda w: (len(w), w[::-1]))
    print("words", len(ws), "distinct", len(set(ws)))
    print("first", ws_sorted[:3], "last", ws_sorted[-3:])
    print("by length", by_len[:3], by_len[-2:])

    counts = {}
    for w in ws:
        counts[w[:2]] = counts.get(w[:2], 0) + 1
    top = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:5]
    print("top prefixes", top)

    doc = {"items": [{"id": i, "name": ws[i], "tags": ws[i:i + 3], "score": i * 0.5} for i in range(20000)]}
    text = json.dumps(doc, sort_keys=True)
    back = json.loads(text)
    print("json bytes", len(text), "roundtrip", back == doc,
          "sha", hashlib.sha256(text.encode()).hexdigest()[:16])

    big = 1
    for i in range(1, 1500):
        big *= i
    print("1499! digits", len(str(big)), "mod", big % 1000000007)

    joined = "-".join(ws[:20000])
    parts = joined.split("-")
    print("join/split", len(joined), parts == ws[:20000], joined.count("ab"), joined.upper()[:12])

    results = [None] * 4

    def run(i):
        results[i] = churn(100 + i, 40000)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print("threads", results)
    print("single", churn(7, 60000))


main()
