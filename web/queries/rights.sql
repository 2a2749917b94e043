-- What the connecting role may call: EXECUTE on each action's function
-- (retry and cancel are open to PUBLIC unless a DBA revoked them), false
-- for one this version of the extension lacks; and whether it may read
-- queue_queues, where each queue's owner is kept. queue_purge takes the
-- ids of the jobs to purge from 0.4 on (purge_ids), and its two-argument
-- form is then that one with a default.
SELECT coalesce(has_function_privilege(to_regprocedure('queue_retry(bigint)'), 'EXECUTE'), false) AS retry,
       coalesce(has_function_privilege(to_regprocedure('queue_cancel(bigint)'), 'EXECUTE'), false) AS cancel,
       coalesce(has_function_privilege(to_regprocedure('queue_pause(text)'), 'EXECUTE'), false) AS pause,
       coalesce(has_function_privilege(to_regprocedure('queue_resume(text)'), 'EXECUTE'), false) AS resume,
       coalesce(has_function_privilege(coalesce(to_regprocedure('queue_purge(text, text)'),
                                                to_regprocedure('queue_purge(text, text, bigint[])')),
                                       'EXECUTE'), false) AS purge,
       coalesce(has_function_privilege(to_regprocedure('queue_purge(text, text, bigint[])'), 'EXECUTE'), false) AS purge_ids,
       to_regprocedure('queue_purge(text, text, bigint[])') IS NOT NULL AS has_purge_ids,
       coalesce(has_function_privilege(to_regprocedure('queue_run_schedule(text)'), 'EXECUTE'), false) AS run_schedule,
       has_table_privilege('queue_queues', 'SELECT') AS reads_queues
