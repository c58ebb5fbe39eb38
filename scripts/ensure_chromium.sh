#!/bin/sh
# Installs Debian's chromium for the browser tests when it is missing and we may
# (root with apt-get, as in CI). Otherwise says how; the browser tests then fail with
# the same hint rather than pass silently.
if [ -x /usr/bin/chromium ]; then exit 0; fi
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  echo "Installing Debian's chromium for the browser tests..."
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null && exit 0
  echo "apt-get could not install chromium" >&2
  exit 1
fi
echo "warning: /usr/bin/chromium is missing; install Debian's 'chromium' package for the browser tests" >&2
exit 0
