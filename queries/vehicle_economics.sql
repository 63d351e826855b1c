-- Fare per km and surge by vehicle type, completed trips only.
SELECT vehicle_type,
       count(*)                          AS trips,
       sum(fare_total) / sum(distance_km) AS usd_per_km,
       avg(surge)                        AS avg_surge,
       max(fare_local)                   AS max_fare_local,
       sum(CASE WHEN is_pool THEN 1 ELSE 0 END) AS pool_trips
FROM trips
WHERE status = 2 AND distance_km > 0
GROUP BY vehicle_type
ORDER BY vehicle_type
