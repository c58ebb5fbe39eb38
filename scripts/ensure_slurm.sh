#!/bin/sh
# Installs Debian's slurm-wlm and munge for the cluster-engine tests when they are missing and we may
# (root with apt-get, as in CI). The packages' own services are not started or enabled: the tests start their own
# daemons on loopback with their state in a temporary folder (tests/e2e/clusters.py). Otherwise says how; the Slurm
# tests then skip with the same reason.
if command -v sbatch >/dev/null 2>&1 && command -v slurmctld >/dev/null 2>&1 && command -v slurmd >/dev/null 2>&1 \
   && command -v munged >/dev/null 2>&1; then exit 0; fi
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  echo "Installing Debian's slurm-wlm and munge for the cluster-engine tests..."
  # policy-rc.d 101: the packages' init scripts must not start the system's own slurm or munge.
  had_policy=0; [ -e /usr/sbin/policy-rc.d ] && had_policy=1
  [ $had_policy = 1 ] || { printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d; chmod +x /usr/sbin/policy-rc.d; }
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    slurm-wlm munge >/dev/null
  status=$?
  [ $had_policy = 1 ] || rm -f /usr/sbin/policy-rc.d
  [ $status = 0 ] && exit 0
  echo "apt-get could not install slurm-wlm and munge; the Slurm tests will skip" >&2
  exit 0
fi
echo "warning: Slurm is not installed; install Debian's 'slurm-wlm' and 'munge' packages for the Slurm tests (they skip otherwise)" >&2
exit 0
