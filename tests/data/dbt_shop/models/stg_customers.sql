select id, name, email, country from {{ ref('raw_customers') }}
