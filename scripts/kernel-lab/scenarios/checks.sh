# Sourced by the scenarios run in the guests (layers.sh, ustack.sh, blame.sh): the failure
# count and the check that prints each expectation.
FAILS=0
# check NAME GOT WANT: `PASS NAME = WANT`, or `FAIL NAME: got GOT, want WANT` counted in FAILS.
check() {
  if [ "$2" = "$3" ]; then echo "PASS $1 = $3"; else echo "FAIL $1: got $2, want $3"; FAILS=$((FAILS + 1)); fi
}
