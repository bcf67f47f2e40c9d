/* placeholder: the dashboard app (issue 17) */
