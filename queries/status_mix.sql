-- How trips end up, per UTC day: requested, accepted, completed, cancelled.
SELECT event_date AS day,
       sum(CASE WHEN status = 0 THEN 1 ELSE 0 END) AS requested,
       sum(CASE WHEN status = 1 THEN 1 ELSE 0 END) AS accepted,
       sum(CASE WHEN status = 2 THEN 1 ELSE 0 END) AS completed,
       sum(CASE WHEN status = 3 THEN 1 ELSE 0 END) AS cancelled,
       count(*)                                    AS total
FROM trips
GROUP BY event_date
ORDER BY day
