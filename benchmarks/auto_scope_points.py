"""Gathers every measured (scope, staging, TB/s) point of the programs into the one file the cost
model is checked against (tests/test_auto_scope.py; csrc/program/scope_cost.cc):

    python benchmarks/auto_scope_points.py OUT.json RESULT.json... [--exclude TEXT]...

Each RESULT is a scope sweep (benchmarks/program_scopes.py's lines, its choice among them, or
{"runs": [...]} of them) or a benchmarks/programs.py run ({"rows": [...]}, each row's detail
naming its scope and staging); fastmath rows and host wall times are left out. A point is
(case, scope, staging), case being 'program row-length dtype'; its tbps is the median of every run
that measured it (the same point differs by a few % from run to run), each run listed with its file.
--exclude leaves out the cases containing TEXT (a row length measured before a change that made its
points stale, say); TEXT@FILE only those of the result file named FILE."""
import argparse
import json
import pathlib
import statistics
import sys


def measurements(path: pathlib.Path):
    """(case, scope, staging, rows x row, TB/s) of every run in one result file."""
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError:  # program_scopes.py's own output (on_gpu.sh scopes: $OUT/scopes_*.log)
        lines = [json.loads(line) for line in path.read_text().splitlines() if line.startswith("{")]
        data = {"runs": [line.get("chosen", line) for line in lines]}
    for run in data.get("runs", []):
        if "best" in run:
            continue
        name, shape, dtype = run["case"].split()
        scope = run["scope"] if "scope" in run else f"cta({run['threads']})"  # the first sweep named threads
        yield f"{name} {shape.split('x')[1]} {dtype}", scope, run["staging"], shape, run["tbps"]
    for row in data.get("rows", []):
        detail = row["detail"]
        if row["kind"] != "program" or "host" in row["case"] or detail.get("fastmath") or "staging" not in detail:
            continue
        _, name, shape, dtype = row["case"].split()[:4]
        tbps = row["tileprim_GBps"] / 1000
        yield f"{name} {shape.split('x')[1]} {dtype}", detail["scope"], detail["staging"], shape, tbps


def main(out: str, sources: list[str], excluded: list[str]) -> None:
    points: dict = {}
    for source in map(pathlib.Path, sources):
        for case, scope, staging, shape, tbps in measurements(source):
            if any(text in case for text, only_in in excluded if only_in in ("", source.name)):
                continue
            point = points.setdefault((case, scope, staging), {"shape": shape, "measured": []})
            point["measured"].append({"tbps": round(tbps, 3), "source": source.name})
    runs = [{"case": case, "scope": scope, "staging": staging, "shape": p["shape"],
             "tbps": round(statistics.median(m["tbps"] for m in p["measured"]), 3), "measured": p["measured"]}
            for (case, scope, staging), p in sorted(points.items())]
    header = {"what": __doc__.split("\n\n")[-1].replace("\n", " "),
              "command": " ".join(["python benchmarks/auto_scope_points.py", out, *sources,
                                   *(f"--exclude '{text}@{only_in}'" if only_in else f"--exclude '{text}'"
                                     for text, only_in in excluded)])}
    pathlib.Path(out).write_text(json.dumps({"header": header, "runs": runs}, indent=1) + "\n")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out")
    parser.add_argument("sources", nargs="+")
    parser.add_argument("--exclude", action="append", default=[], metavar="TEXT")
    args = parser.parse_args()
    main(args.out, args.sources, [tuple(e.rsplit("@", 1)) if "@" in e else (e, "") for e in args.exclude])
