#!/usr/bin/env bash
# Builds the synthetic PHP lab tree under $1 (default /tmp/statstorm-lab).
# Layout (all mtimes set to 2026-01-01 so OPcache's file_update_protection,
# R65, never applies to the tree itself):
#   www/tree.php       entry: include tree, include vs include_once, include_path
#   www/filecheck.php  entry: seed-004 style file_exists/is_readable/filesize loop
#   www/override.php   entry: includes three scripts, then file_exists/is_file/
#                      is_readable on them, on a data file and on a missing file
#                      (opcache.enable_file_override)
#   www/t/d1/.../d4/m{0,1,2}.php   depth 4, fan-out 3
#   www/inc/lib/u{1,2}.php          found through include_path (second entry)
#   www/rel/r1.php                  included as './rel/r1.php'
#   data/d{0..3}/f{i}.txt           40 names, every fifth missing
#   site/index.php     entry of the theme workload (seed 000, a WordPress theme):
#                      require_once of 180 files by absolute paths built from
#                      ABSPATH (define('ABSPATH', __DIR__ . '/')), each defining
#                      one function; echoes the count of included files
#   site/theme/inc/part-{0..29}.php                 30
#   site/theme/template-parts/header/part-{0..19}   20
#   site/theme/template-parts/content/part-{0..29}  30
#   site/theme/template-parts/footer/part-{0..19}   20
#   site/theme/lib/vendor/a/src/part-{0..39}        40
#   site/theme/lib/vendor/b/src/part-{0..39}        40
set -euo pipefail
LAB=${1:-/tmp/statstorm-lab}
rm -rf "$LAB"
mkdir -p "$LAB/www/inc/lib" "$LAB/www/rel" "$LAB/data"
W=$LAB/www
# include tree: level k file m_j includes (include_once) the three files of level k+1
dir=$W/t
for k in 1 2 3 4; do
  dir=$dir/d$k
  mkdir -p "$dir"
  for j in 0 1 2; do
    if [ $k -lt 4 ]; then
      {
        echo '<?php'
        for n in 0 1 2; do echo "include_once __DIR__ . '/d$((k + 1))/m$n.php';"; done
        echo "\$GLOBALS['n'][] = 'd$k/m$j';"
      } >"$dir/m$j.php"
    else
      printf '<?php\n$GLOBALS["n"][] = "d%s/m%s";\n' "$k" "$j" >"$dir/m$j.php"
    fi
  done
done
printf '<?php\nfunction u1() { return 1; }\n' >"$W/inc/lib/u1.php"
printf '<?php\nfunction u2() { return 2; }\n' >"$W/inc/lib/u2.php"
printf '<?php\n$GLOBALS["n"][] = "r1";\n' >"$W/rel/r1.php"
cat >"$W/tree.php" <<'PHP'
<?php
// Synthetic include workload (statstorm php-harness).
$GLOBALS['n'] = [];
include __DIR__ . '/t/d1/m0.php';
include __DIR__ . '/t/d1/m1.php';
include __DIR__ . '/t/d1/m2.php';
require_once __DIR__ . '/t/d1/m0.php';
include 'lib/u1.php';
require_once 'lib/u2.php';
include_once 'lib/u2.php';
for ($i = 0; $i < 3; $i++) {
    include __DIR__ . '/t/d1/d2/d3/d4/m0.php';
}
include './rel/r1.php';
echo count($GLOBALS['n']), "\n";
PHP
for i in $(seq 0 39); do
  if [ $((i % 5)) -ne 4 ]; then
    mkdir -p "$LAB/data/d$((i % 4))"
    head -c $((100 + i)) /dev/zero >"$LAB/data/d$((i % 4))/f$i.txt"
  fi
done
cat >"$W/filecheck.php" <<'PHP'
<?php
// Seed-004 style integrity loop (statstorm php-harness).
$ok = [];
for ($i = 0; $i < 40; $i++) {
    $p = '/tmp/statstorm-lab/data/d' . ($i % 4) . "/f$i.txt";
    if (file_exists($p)) {
        if (is_readable($p)) {
            $s = filesize($p);
            if ($s > 0 && is_file($p)) {
                $ok[] = $p;
            }
        }
    }
}
$c = file_get_contents('/tmp/statstorm-lab/data/d0/f0.txt');
echo count($ok), ' ', strlen($c), "\n";
PHP
sed -i "s|/tmp/statstorm-lab|$LAB|g" "$W/filecheck.php"
cat >"$W/override.php" <<'PHP'
<?php
// opcache.enable_file_override workload (statstorm php-harness): file
// functions on scripts OPcache holds, on a data file and on a missing file.
$GLOBALS['n'] = [];
$scripts = [__DIR__ . '/inc/lib/u1.php', __DIR__ . '/rel/r1.php', __DIR__ . '/t/d1/d2/d3/d4/m1.php'];
foreach ($scripts as $f) {
    include_once $f;
}
$files = array_merge($scripts, [dirname(__DIR__) . '/data/d0/f0.txt', dirname(__DIR__) . '/data/d0/f4.txt']);
$yes = 0;
for ($r = 0; $r < 3; $r++) {
    foreach ($files as $f) {
        $yes += (int) file_exists($f);
        $yes += (int) is_file($f);
        $yes += (int) is_readable($f);
    }
}
echo $yes, ' ', count($GLOBALS['n']), "\n";
PHP
# the theme (seed 000): the layout and include order of the NFS lab's
# workload (its site/index.php and site/theme/...), under $LAB/site
S=$LAB/site
mkdir -p "$S"
{
  echo '<?php'
  echo '// Theme workload (statstorm php-harness, seed 000): require_once 180 files'
  echo '// by absolute paths, WordPress style (ABSPATH . ...).'
  echo "define('ABSPATH', __DIR__ . '/');"
  echo "\$GLOBALS['parts'] = [];"
  for spec in inc:30 template-parts/header:20 template-parts/content:30 \
              template-parts/footer:20 lib/vendor/a/src:40 lib/vendor/b/src:40; do
    d=theme/${spec%%:*}
    mkdir -p "$S/$d"
    for i in $(seq 0 $((${spec##*:} - 1))); do
      fn=${d//[^a-zA-Z0-9]/_}_part_$i
      printf '<?php\n// %s/part-%s.php\nfunction %s() { return %s; }\n$GLOBALS["parts"][] = "%s/part-%s.php";\n' \
        "$d" "$i" "$fn" "$i" "$d" "$i" >"$S/$d/part-$i.php"
      echo "require_once ABSPATH . '$d/part-$i.php';"
    done
  done
  echo "echo count(\$GLOBALS['parts']), \"\\n\";"
} >"$S/index.php"
find "$LAB" -exec touch -h -d '2026-01-01 00:00:00' {} +
