# The three device calls of this series, as run (scripts/probes/device_session.sh at 2d1e1c51, copied to .diag/).
STAGE=31 URUN=20261129-s43-u TRUN=20261129-s43-tests TESTS="trees bench lean scg pi_tree mutated_inputs cgct pi layout_race" UCONFIGS="all-free-mut-lean-copy all-lean-copy all-mut-lean-copy stock" SHARDS=5 T=585 bash .diag/device_session.sh
STAGE=3 URUN=20261129-s43-u DRUN=20261129-s43-diff UCONFIGS="all-free-mut-lean-copy all-lean-copy all-mut-lean-copy stock" DCONFIGS="stock all-free-mut-lean-copy all-mut-lean-copy all-lean-copy" SHARDS=5 T=540 bash .diag/device_session.sh
STAGE=36 PRUN=20261129-s43 SPLIT_MODESET=pt2-cg,grace-no-guard,grace SPLIT_REPEAT=20 SRUN=20261129-s43-sweep T=590 bash .diag/device_session.sh
