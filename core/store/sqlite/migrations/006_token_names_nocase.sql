-- Token names are unique ignoring case: a name becomes requester and
-- approved_by, and four-eyes approval compares them ignoring case, so alice and
-- Alice must never be two tokens at once. Names are ASCII (core/auth), where
-- lower() is exact.
--
-- A database that already holds names differing only in case stops the
-- upgrade with one clear error (a trigger is the one place SQLite lets SQL
-- raise one), rather than failing on the index below with a terse message.
CREATE TEMP TABLE token_names_check (x INTEGER);
CREATE TEMP TRIGGER token_names_check_raise BEFORE INSERT ON token_names_check
WHEN EXISTS (SELECT 1 FROM main.tokens GROUP BY lower(name) HAVING count(*) > 1)
BEGIN
    SELECT RAISE(ABORT, 'token names that differ only in case (like alice and Alice): revoke all but one of each with the previous version, then start again');
END;
INSERT INTO token_names_check VALUES (1);
DROP TABLE token_names_check;

CREATE UNIQUE INDEX tokens_name_nocase ON tokens (lower(name));
