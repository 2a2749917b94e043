-- Every object of the extension `queue` in the current database, one line
-- each with its whole definition, in an order that does not depend on oids:
-- what "equal to a fresh install" compares. $1: whether privileges count
-- (the ACLs as they stand, and the extension's initial privileges).
WITH ext AS (
    SELECT oid FROM pg_extension WHERE extname = 'queue'
), member AS (
    SELECT d.classid, d.objid FROM pg_depend d, ext
     WHERE d.refclassid = 'pg_extension'::regclass AND d.refobjid = ext.oid AND d.deptype = 'e'
), rel AS (
    SELECT c.* FROM pg_class c JOIN member m ON m.classid = 'pg_class'::regclass AND m.objid = c.oid
)
SELECT line FROM (
    SELECT 'extension ' || e.extname || ' ' || e.extversion || ' in ' || e.extnamespace::regnamespace
           || ' relocatable ' || e.extrelocatable
           || ' config ' || coalesce((SELECT string_agg(c::regclass::text || ' where ' || coalesce(w, ''), ', ' ORDER BY c::regclass::text)
                                        FROM unnest(e.extconfig, e.extcondition) AS u(c, w)), '')
           || ' comment ' || coalesce(obj_description(e.oid, 'pg_extension'), '')
      FROM pg_extension e WHERE e.extname = 'queue'
    UNION ALL
    SELECT 'member ' || m.classid::regclass || ' ' || pg_describe_object(m.classid, m.objid, 0)
           || ' comment ' || coalesce(obj_description(m.objid, m.classid::regclass::text), '')
      FROM member m
    UNION ALL
    SELECT 'column comment ' || r.oid::regclass || '.' || d.objsubid || ' ' || d.description
      FROM pg_description d JOIN rel r ON d.classoid = 'pg_class'::regclass AND d.objoid = r.oid
     WHERE d.objsubid > 0
    UNION ALL
    SELECT 'function ' || p.oid::regprocedure || ' kind ' || p.prokind::text || ' '
           || CASE WHEN p.prokind = 'a' THEN '' ELSE pg_get_functiondef(p.oid) END
           || CASE WHEN $1 THEN ' acl ' || coalesce(p.proacl::text, 'default') ELSE '' END
      FROM pg_proc p JOIN member m ON m.classid = 'pg_proc'::regclass AND m.objid = p.oid
    UNION ALL
    SELECT 'relation ' || r.oid::regclass || ' kind ' || r.relkind::text || ' persistence ' || r.relpersistence::text
           || ' options ' || coalesce(r.reloptions::text, '') || ' partition of '
           || coalesce((SELECT i.inhparent::regclass::text FROM pg_inherits i WHERE i.inhrelid = r.oid), '')
           || ' ' || coalesce(pg_get_expr(r.relpartbound, r.oid), '')
           || ' ' || coalesce(pg_get_partkeydef(r.oid), '')
           || CASE WHEN r.relkind = 'v' THEN ' ' || pg_get_viewdef(r.oid) ELSE '' END
           || CASE WHEN $1 THEN ' acl ' || coalesce(r.relacl::text, 'default') ELSE '' END
      FROM rel r
    UNION ALL
    SELECT 'column ' || r.oid::regclass || ' ' || a.attnum || ' ' || a.attname || ' '
           || format_type(a.atttypid, a.atttypmod) || ' not null ' || a.attnotnull
           || ' default ' || coalesce(pg_get_expr(d.adbin, d.adrelid), '')
           || ' identity ' || a.attidentity::text || ' generated ' || a.attgenerated::text
           || ' collation ' || a.attcollation::regcollation
      FROM rel r JOIN pg_attribute a ON a.attrelid = r.oid AND a.attnum > 0 AND NOT a.attisdropped
      LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
    UNION ALL
    SELECT 'index ' || pg_get_indexdef(i.indexrelid) || ' ' || i.indexrelid::regclass
      FROM pg_index i JOIN rel r ON r.oid = i.indrelid
    UNION ALL
    SELECT 'constraint ' || c.conrelid::regclass || ' ' || c.conname || ' ' || pg_get_constraintdef(c.oid)
      FROM pg_constraint c JOIN rel r ON r.oid = c.conrelid
    UNION ALL
    SELECT 'trigger ' || pg_get_triggerdef(t.oid)
      FROM pg_trigger t JOIN rel r ON r.oid = t.tgrelid WHERE NOT t.tgisinternal
    UNION ALL
    SELECT 'rule ' || w.rulename || ' on ' || w.ev_class::regclass || ' ' || pg_get_ruledef(w.oid)
      FROM pg_rewrite w JOIN rel r ON r.oid = w.ev_class WHERE w.rulename <> '_RETURN'
    UNION ALL
    SELECT 'policy ' || p.polname || ' on ' || p.polrelid::regclass
      FROM pg_policy p JOIN rel r ON r.oid = p.polrelid
    UNION ALL
    SELECT 'sequence ' || s.seqrelid::regclass || ' ' || s.seqtypid::regtype || ' start ' || s.seqstart
           || ' increment ' || s.seqincrement || ' max ' || s.seqmax || ' min ' || s.seqmin
           || ' cache ' || s.seqcache || ' cycle ' || s.seqcycle
      FROM pg_sequence s JOIN rel r ON r.oid = s.seqrelid
    UNION ALL
    SELECT 'type ' || t.oid::regtype || ' ' || t.typtype::text
      FROM pg_type t JOIN member m ON m.classid = 'pg_type'::regclass AND m.objid = t.oid
    UNION ALL
    SELECT 'initial privileges ' || pg_describe_object(i.classoid, i.objoid, i.objsubid) || ' '
           || i.privtype::text || ' ' || i.initprivs::text
      FROM pg_init_privs i JOIN member m ON m.classid = i.classoid AND m.objid = i.objoid
     WHERE $1
) objects(line)
ORDER BY line
