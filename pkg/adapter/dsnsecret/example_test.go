package dsnsecret_test

import (
	"fmt"

	"github.com/sluice-dev/sluice/pkg/adapter/dsnsecret"
)

// An RDS-managed secret holds a JSON document; Parse turns it into the DSN
// the MySQL sink opens.
func ExampleParse() {
	dsn, err := dsnsecret.Parse(`{"engine":"mysql","username":"sluice_rw","password":"s3cret","host":"orders.example","port":3306,"dbname":"orders"}`)
	fmt.Println(dsn, err)
	// Output: sluice_rw:s3cret@tcp(orders.example:3306)/orders?parseTime=true <nil>
}
