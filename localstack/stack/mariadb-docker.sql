-- Run once by the MariaDB image (docker-compose.yml) after it created the
-- database and user sluice: the tests may also create databases sluice_*,
-- as with localstack/stack/up.sh.
GRANT ALL PRIVILEGES ON `sluice\_%`.* TO 'sluice'@'%';
GRANT PROCESS ON *.* TO 'sluice'@'%';
FLUSH PRIVILEGES;
