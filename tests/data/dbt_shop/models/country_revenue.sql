select country, sum(total) as revenue from {{ ref('customer_orders') }} group by country
