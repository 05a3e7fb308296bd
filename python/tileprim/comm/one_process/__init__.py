"""treduce in one process, every rank's tensor at hand: the call checked (here and in the C++
core) before anything is written, bound to its plan and run; a repeated call reuses its bound
plan. Across processes the root's transport runs this same treduce over every rank's data as it
exposes it, so the plan, the fold order and the bits are the one-process ones."""
