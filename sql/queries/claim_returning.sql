           -- (the end of claim_set.sql's array of the ids picked)
           ))
RETURNING l.id, l.state, l.payload, l.headers, l.attempts, l.enqueued_at, l.lease,
          l.lease_expires_at, l.priority, l.run_at, l.turn,
          -- (the Standard Webhooks id: the job's uid, for ever)
          CASE WHEN $6::text IS NOT NULL THEN 'msg_' || replace(l.uid::text, '-', '') END
              AS webhook_id,
          CASE WHEN $6::text IS NULL THEN NULL
               WHEN l.depends_on IS NULL THEN
              jsonb_build_object('id', l.id, 'queue', $6::text, 'payload', l.payload,
                                 'headers', l.headers, 'attempt', l.attempts,
                                 'max_attempts', $3::int, 'enqueued_at', l.enqueued_at)::text
               ELSE
              jsonb_build_object('id', l.id, 'queue', $6::text, 'payload', l.payload,
                                 'headers', l.headers, 'attempt', l.attempts,
                                 'max_attempts', $3::int, 'enqueued_at', l.enqueued_at,
                                 'depends_on', l.depends_on)::text
          END AS body,
          l.group_key
