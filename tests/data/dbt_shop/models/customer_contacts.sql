select customer_id, email from {{ ref('customer_orders') }}
