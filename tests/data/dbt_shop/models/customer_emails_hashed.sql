select id, md5(email) as email_hash from {{ ref('stg_customers') }}
