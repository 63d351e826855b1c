-- Completed trips and fares (USD) per city and UTC day.
SELECT city_id,
       event_date                AS day,
       count(*)                  AS trips,
       sum(fare_total)           AS fares_usd,
       avg(fare_total)           AS avg_fare_usd,
       sum(distance_km)          AS distance_km
FROM trips
WHERE status = 2
GROUP BY city_id, event_date
ORDER BY day, city_id
