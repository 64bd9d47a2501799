# device_common.sh: what every device-call script of tools/ starts with (sourced, from the
# repo root): $OUT made, a time budget (BUDGET_S seconds from now, default 540; `left`
# prints the seconds left), the carried wheels (.whl) installed into /tmp/site, and
# PYTHONPATH, SKCONTRACT_COMMIT (from the carried .commit) and unbuffered Python exported.
OUT=${OUT:-$PWD/device_out}; mkdir -p "$OUT"
T0=$(date +%s); BUDGET_S=${BUDGET_S:-540}
left() { echo $(( BUDGET_S - ($(date +%s) - T0) )); }
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
  .whl/*.whl > /dev/null 2>&1
export SKCONTRACT_COMMIT=$(cat .commit) PYTHONPATH=$PWD:/tmp/site PYTHONUNBUFFERED=1
