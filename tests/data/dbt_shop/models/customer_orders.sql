select c.id as customer_id, c.email, c.country, sum(o.amount) as total
from {{ ref('stg_customers') }} c
join {{ ref('raw_orders') }} o on o.customer_id = c.id
group by c.id, c.email, c.country
