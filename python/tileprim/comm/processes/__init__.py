"""One process per rank: how a process learns its place in the job (launcher.py), how the ranks
meet once (bootstrap.py, init_file.py) and at every call (rendezvous.py on one host,
rendezvous_hosts.py across hosts), and a treduce call's protocol over them (call.py, with this
rank's checked part in rank_part.py)."""
