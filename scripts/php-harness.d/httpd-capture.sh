#!/usr/bin/env bash
# Captures Apache httpd running PHP in-process (mod_php, Debian's
# libapache2-mod-php8.2) under `strace -f -ttt -T -y`: one child
# (`apache2 -X`, no fork), the lab's tree workload with OPcache off, four
# requests. The request splitter labels such requests `httpd_accept`
# (APR's accept4) rather than FastCGI's (`accept`).
#
#   scripts/php-harness.d/httpd-capture.sh [OUT] [LAB]
#       OUT  default tests/fixtures/httpd/httpd-tree-nooc.strace.gz
#       LAB  the lab tree (scripts/php-harness.d/mklab.sh), default /tmp/statstorm-lab
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:-tests/fixtures/httpd/httpd-tree-nooc.strace.gz}
LAB=${2:-/tmp/statstorm-lab}
PORT=${HTTPD_CAPTURE_PORT:-9481}
for t in apache2 strace curl gzip; do
    command -v $t >/dev/null || { echo "httpd-capture: $t is missing (apt-get install apache2 libapache2-mod-php strace curl)" >&2; exit 1; }
done
[ -f /usr/lib/apache2/modules/libphp8.2.so ] || { echo "httpd-capture: mod_php is missing (apt-get install libapache2-mod-php8.2)" >&2; exit 1; }
[ -f "$LAB/www/tree.php" ] || scripts/php-harness.d/mklab.sh "$LAB" >/dev/null
D=$(mktemp -d)
trap 'pkill -f "apache2 -X -f $D/httpd.conf" 2>/dev/null || true; rm -rf "$D"' EXIT
mkdir -p "$D/logs" "$D/run"
touch "$D/php.ini"
cat >"$D/httpd.conf" <<CONF
ServerRoot "$D"
Listen 127.0.0.1:$PORT
PidFile $D/run/httpd.pid
ServerName localhost
LoadModule mpm_prefork_module /usr/lib/apache2/modules/mod_mpm_prefork.so
LoadModule authz_core_module /usr/lib/apache2/modules/mod_authz_core.so
LoadModule dir_module /usr/lib/apache2/modules/mod_dir.so
LoadModule mime_module /usr/lib/apache2/modules/mod_mime.so
LoadModule php_module /usr/lib/apache2/modules/libphp8.2.so
TypesConfig /etc/mime.types
DocumentRoot "$LAB/www"
<Directory "$LAB/www">
  Require all granted
</Directory>
<FilesMatch "\.php\$">
  SetHandler application/x-httpd-php
</FilesMatch>
ErrorLog $D/logs/error.log
KeepAlive Off
PHPIniDir $D
php_admin_value opcache.enable 0
php_admin_value include_path ".:$LAB/www/inc"
CONF
strace -f -ttt -T -y -o "$D/trace" apache2 -X -f "$D/httpd.conf" &
for _ in $(seq 50); do
    curl -s -o /dev/null "http://127.0.0.1:$PORT/" 2>/dev/null && break
    sleep 0.1
done
for _ in 1 2 3 4; do
    out=$(curl -s "http://127.0.0.1:$PORT/tree.php")
    [[ $out =~ ^[0-9] ]] || { echo "httpd-capture: unexpected response: ${out:0:200}" >&2; exit 1; }
    sleep 0.3
done
pkill -f "apache2 -X -f $D/httpd.conf"
wait || true
mkdir -p "$(dirname "$OUT")"
gzip -9 <"$D/trace" >"$OUT"
echo "httpd-capture: $OUT ($(zcat "$OUT" | wc -l) lines)" >&2
