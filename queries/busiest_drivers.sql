-- The ten drivers with the most completed trips, with their first and last trip.
SELECT driver_id,
       count(*)          AS completed_trips,
       min(event_time)   AS first_trip,
       max(event_time)   AS last_trip,
       sum(fare_total)   AS fares_usd
FROM trips
WHERE status = 2 AND driver_id IS NOT NULL
GROUP BY driver_id
ORDER BY completed_trips DESC, driver_id
LIMIT 10
