-- (claim_set.sql, ordered_front.sql) The heads' ids (ordered_heads.sql).
           SELECT r.id
