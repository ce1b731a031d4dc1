#!/usr/bin/env bash
# Installs a MediaWiki site from Debian's `mediawiki` package for the
# harness, on SQLite (/var/lib/mediawiki/data), with
# /etc/mediawiki/LocalSettings.php written by maintenance/install.php.
# Idempotent. Needs: mediawiki, php-sqlite3, php-intl, php-mbstring, php-xml.
set -euo pipefail
[ -d /usr/share/mediawiki ] || { echo "setup-mediawiki: mediawiki package missing" >&2; exit 1; }
if [ ! -f /etc/mediawiki/LocalSettings.php ]; then
  mkdir -p /var/lib/mediawiki/data
  chown www-data: /var/lib/mediawiki/data
  php /usr/share/mediawiki/maintenance/install.php \
    --confpath /etc/mediawiki \
    --dbtype sqlite --dbpath /var/lib/mediawiki/data --dbname statstorm_mw \
    --server http://localhost --scriptpath "" \
    --pass statstorm-lab-admin "statstorm lab" admin >/dev/null
  chown -R www-data: /var/lib/mediawiki/data
fi
echo "mediawiki ready"
