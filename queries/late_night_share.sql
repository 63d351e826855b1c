-- Share of each city's trips that start between 00:00 and 05:00 UTC.
SELECT city_id,
       count(*)                                                      AS trips,
       sum(CASE WHEN hour(event_time) < 5 THEN 1 ELSE 0 END)         AS late_night_trips,
       sum(CASE WHEN hour(event_time) < 5 THEN 1 ELSE 0 END) / count(*) AS late_night_share
FROM trips
GROUP BY city_id
ORDER BY city_id
