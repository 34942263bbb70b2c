#!/usr/bin/env sh
# The secrets docker-compose.yaml requires, generated into an env file (default: ./.env, which
# .gitignore keeps out of git and Compose reads on its own): random values, never committed.
# A variable the file already has keeps its value, so running this again only adds what is
# missing: a new Fernet key would make the stored connections unreadable, and a new database
# password would not match the Postgres volume that was initialised with the old one.
#   scripts/compose-env.sh [FILE]      then   docker compose up -d
set -eu

file=${1:-.env}
umask 077

hex() { od -An -tx1 -N32 /dev/urandom | tr -d ' \n'; }
# Airflow's Fernet key: 32 random bytes in URL-safe base64.
fernet() { head -c 32 /dev/urandom | base64 | tr '+/' '-_'; }

[ -e "$file" ] || : >"$file"
# A last line without its newline would run into the first variable added.
[ -z "$(tail -c 1 "$file")" ] || echo >>"$file"
added=""
add() {
    if ! grep -q "^$1=" "$file"; then
        printf '%s=%s\n' "$1" "$2" >>"$file"
        added="$added $1"
    fi
}
add AIRFLOW_JWT_SECRET "$(hex)"
add AIRFLOW_API_SECRET_KEY "$(hex)"
add AIRFLOW_FERNET_KEY "$(fernet)"
add POSTGRES_PASSWORD "$(hex)"
add SPARK_AUTH_SECRET "$(hex)"
chmod 600 "$file"
if [ -n "$added" ]; then
    echo "compose-env: generated$added in $file"
else
    echo "compose-env: $file has every secret already"
fi
