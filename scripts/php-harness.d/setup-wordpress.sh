#!/usr/bin/env bash
# Installs a WordPress site from Debian's `wordpress` package for the
# harness: MariaDB database `statstorm_wp`, /etc/wordpress/config-localhost.php,
# then wp_install() through php-cli. Idempotent. Needs: wordpress,
# mariadb-server (running), php-mysql.
set -euo pipefail
command -v mysql >/dev/null || { echo "setup-wordpress: mariadb-server missing" >&2; exit 1; }
[ -d /usr/share/wordpress ] || { echo "setup-wordpress: wordpress package missing" >&2; exit 1; }
mysqladmin ping >/dev/null 2>&1 || service mariadb start >/dev/null
mysql <<'SQL'
CREATE DATABASE IF NOT EXISTS statstorm_wp;
CREATE USER IF NOT EXISTS 'statstorm_wp'@'localhost' IDENTIFIED BY 'statstorm-lab';
GRANT ALL ON statstorm_wp.* TO 'statstorm_wp'@'localhost';
SQL
# written only when it changes: a fresh mtime makes OPcache skip caching
# the file for file_update_protection's 2 s (R65), so a re-run would change
# the next capture
cat >/etc/wordpress/config-localhost.php.new <<'PHP'
<?php
define('DB_NAME', 'statstorm_wp');
define('DB_USER', 'statstorm_wp');
define('DB_PASSWORD', 'statstorm-lab');
define('DB_HOST', 'localhost');
define('WP_CONTENT_DIR', '/var/lib/wordpress/wp-content');
define('WP_HOME', 'http://localhost');
define('WP_SITEURL', 'http://localhost');
define('DISABLE_WP_CRON', true);
PHP
if cmp -s /etc/wordpress/config-localhost.php.new /etc/wordpress/config-localhost.php; then
    rm /etc/wordpress/config-localhost.php.new
else
    mv /etc/wordpress/config-localhost.php.new /etc/wordpress/config-localhost.php
fi
php -r '
$_SERVER["HTTP_HOST"] = "localhost";
$_SERVER["REQUEST_URI"] = "/";
define("WP_INSTALLING", true);
require "/usr/share/wordpress/wp-load.php";
require_once ABSPATH . "wp-admin/includes/upgrade.php";
if (!is_blog_installed()) {
    wp_install("statstorm lab", "admin", "admin@example.invalid", true, "", "statstorm-lab");
    echo "installed\n";
} else {
    echo "already installed\n";
}
'
