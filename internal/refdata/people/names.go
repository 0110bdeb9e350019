package people

// Word lists of the synthetic generator. Common given names and surnames,
// street names and real US cities with a three-digit zip prefix of that
// city, so generated addresses are consistent (zip prefix within the
// state); every combination is made up.

var maleFirst = []string{
	"James", "Robert", "John", "Michael", "David", "William", "Richard", "Joseph",
	"Thomas", "Charles", "Christopher", "Daniel", "Matthew", "Anthony", "Mark",
	"Donald", "Steven", "Paul", "Andrew", "Joshua", "Kenneth", "Kevin", "Brian",
	"George", "Timothy", "Ronald", "Edward", "Jason", "Jeffrey", "Ryan", "Jacob",
	"Gary", "Nicholas", "Eric", "Jonathan", "Stephen", "Larry", "Justin", "Scott",
	"Brandon", "Benjamin", "Samuel", "Gregory", "Alexander", "Patrick", "Frank",
	"Raymond", "Jack", "Dennis", "Jerry", "Tyler", "Aaron", "Jose", "Adam",
	"Nathan", "Henry", "Zachary", "Douglas", "Peter", "Kyle", "Noah", "Ethan",
	"Jeremy", "Walter", "Christian", "Keith", "Roger", "Terry", "Austin", "Sean",
	"Gerald", "Carl", "Harold", "Dylan", "Arthur", "Lawrence", "Jordan", "Jesse",
	"Bryan", "Billy", "Bruce", "Gabriel", "Joe", "Logan", "Alan", "Juan", "Albert",
	"Willie", "Elijah", "Wayne", "Randy", "Vincent", "Mason", "Roy", "Ralph",
	"Bobby", "Russell", "Bradley", "Philip", "Eugene",
}

var femaleFirst = []string{
	"Mary", "Patricia", "Jennifer", "Linda", "Elizabeth", "Barbara", "Susan",
	"Jessica", "Sarah", "Karen", "Lisa", "Nancy", "Betty", "Sandra", "Margaret",
	"Ashley", "Kimberly", "Emily", "Donna", "Michelle", "Carol", "Amanda",
	"Melissa", "Deborah", "Stephanie", "Dorothy", "Rebecca", "Sharon", "Laura",
	"Cynthia", "Amy", "Kathleen", "Angela", "Shirley", "Brenda", "Emma", "Anna",
	"Pamela", "Nicole", "Samantha", "Katherine", "Christine", "Helen", "Debra",
	"Rachel", "Carolyn", "Janet", "Maria", "Catherine", "Heather", "Diane",
	"Olivia", "Julie", "Joyce", "Victoria", "Ruth", "Virginia", "Lauren", "Kelly",
	"Christina", "Joan", "Evelyn", "Judith", "Andrea", "Hannah", "Megan",
	"Cheryl", "Jacqueline", "Martha", "Madison", "Teresa", "Gloria", "Sara",
	"Janice", "Ann", "Kathryn", "Abigail", "Sophia", "Frances", "Jean", "Alice",
	"Judy", "Isabella", "Julia", "Grace", "Amber", "Denise", "Danielle", "Marilyn",
	"Beverly", "Charlotte", "Natalie", "Theresa", "Diana", "Brittany", "Doris",
	"Kayla", "Alexis", "Lori", "Marie",
}

var lastNames = []string{
	"Smith", "Johnson", "Williams", "Brown", "Jones", "Garcia", "Miller", "Davis",
	"Rodriguez", "Martinez", "Hernandez", "Lopez", "Gonzalez", "Wilson", "Anderson",
	"Thomas", "Taylor", "Moore", "Jackson", "Martin", "Lee", "Perez", "Thompson",
	"White", "Harris", "Sanchez", "Clark", "Ramirez", "Lewis", "Robinson", "Walker",
	"Young", "Allen", "King", "Wright", "Scott", "Torres", "Nguyen", "Hill",
	"Flores", "Green", "Adams", "Nelson", "Baker", "Hall", "Rivera", "Campbell",
	"Mitchell", "Carter", "Roberts", "Gomez", "Phillips", "Evans", "Turner", "Diaz",
	"Parker", "Cruz", "Edwards", "Collins", "Reyes", "Stewart", "Morris", "Morales",
	"Murphy", "Cook", "Rogers", "Gutierrez", "Ortiz", "Morgan", "Cooper", "Peterson",
	"Bailey", "Reed", "Kelly", "Howard", "Ramos", "Kim", "Cox", "Ward", "Richardson",
	"Watson", "Brooks", "Chavez", "Wood", "James", "Bennett", "Gray", "Mendoza",
	"Ruiz", "Hughes", "Price", "Alvarez", "Castillo", "Sanders", "Patel", "Myers",
	"Long", "Ross", "Foster", "Jimenez", "Powell", "Jenkins", "Perry", "Russell",
	"Sullivan", "Bell", "Coleman", "Butler", "Henderson", "Barnes", "Gonzales",
	"Fisher", "Vasquez", "Simmons", "Romero", "Jordan", "Patterson", "Alexander",
	"Hamilton", "Graham", "Reynolds", "Griffin", "Wallace", "Moreno", "West",
	"Cole", "Hayes", "Bryant", "Herrera", "Gibson", "Ellis", "Tran", "Medina",
	"Aguilar", "Stevens", "Murray", "Ford", "Castro", "Marshall", "Owens",
	"Harrison", "Fernandez", "McDonald", "Woods", "Washington", "Kennedy", "Wells",
	"Vargas", "Henry", "Chen", "Freeman", "Webb", "Tucker", "Guzman", "Burns",
	"Crawford", "Olson", "Simpson", "Porter", "Hunter", "Gordon", "Mendez", "Silva",
	"Shaw", "Snyder", "Mason", "Dixon", "Munoz", "Hunt", "Hicks", "Holmes", "Palmer",
	"Wagner", "Black", "Robertson", "Boyd", "Rose", "Stone", "Salazar", "Fox",
	"Warren", "Mills", "Meyer", "Rice", "Schmidt", "Garza", "Daniels", "Ferguson",
	"Nichols", "Stephens", "Soto", "Weaver", "Ryan", "Gardner", "Payne", "Grant",
	"Dunn", "Kelley", "Spencer", "Hawkins", "Arnold", "Pierce", "Vazquez", "Hansen",
	"Peters", "Santos", "Hart", "Bradley", "Knight", "Elliott", "Cunningham",
	"Duncan", "Armstrong", "Hudson", "Carroll", "Lane", "Riley", "Andrews",
	"Alvarado", "Ray", "Delgado", "Berry", "Perkins", "Hoffman", "Johnston",
	"Matthews", "Pena", "Richards", "Contreras", "Willis", "Carpenter", "Lawrence",
	"Sandoval",
}

var streetNames = []string{
	"Main", "Oak", "Pine", "Maple", "Cedar", "Elm", "Washington", "Lake", "Hill",
	"Walnut", "Park", "Sunset", "Lincoln", "Jackson", "Church", "River", "Willow",
	"Highland", "Meadow", "Forest", "Spring", "Ridge", "Jefferson", "Madison",
	"Franklin", "Chestnut", "Birch", "Dogwood", "Hickory", "Magnolia", "Center",
	"Mill", "Prospect", "Valley", "Union", "Adams", "Sycamore", "Laurel", "Cherry",
	"Orchard", "Broad", "Market", "Grove", "Summit", "Fairview", "Woodland",
	"Railroad", "Harbor", "Country Club", "Hillcrest", "Lakeview", "Riverside",
	"Bay", "Canyon", "Mesa", "Aspen", "Juniper", "Poplar", "Locust", "Spruce",
}

var streetSuffixes = []string{"St", "Ave", "Rd", "Dr", "Ln", "Ct", "Blvd", "Way", "Pl", "Ter", "Cir"}

// streetSuffixWeights: how often each suffix is drawn.
var streetSuffixWeights = []int{30, 20, 12, 12, 8, 6, 3, 4, 2, 1, 2}

// Fake email domains: the reserved example domains and the .test TLD.
var emailDomains = []string{
	"example.com", "example.net", "example.org",
	"mail.test", "inbox.test", "post.test", "webmail.test",
}
var emailDomainWeights = []int{30, 20, 10, 15, 10, 8, 7}

type city struct {
	name string
	zip3 string
}

type state struct {
	code   string
	weight int // rough relative population
	cities []city
}

var states = []state{
	{"AL", 5, []city{{"Birmingham", "352"}, {"Montgomery", "361"}, {"Mobile", "366"}, {"Huntsville", "358"}}},
	{"AZ", 7, []city{{"Phoenix", "850"}, {"Tucson", "857"}, {"Mesa", "852"}, {"Flagstaff", "860"}}},
	{"CA", 39, []city{{"Los Angeles", "900"}, {"San Diego", "921"}, {"San Jose", "951"}, {"San Francisco", "941"}, {"Sacramento", "958"}, {"Fresno", "937"}}},
	{"CO", 6, []city{{"Denver", "802"}, {"Colorado Springs", "809"}, {"Boulder", "803"}, {"Fort Collins", "805"}}},
	{"FL", 22, []city{{"Miami", "331"}, {"Orlando", "328"}, {"Tampa", "336"}, {"Jacksonville", "322"}, {"Tallahassee", "323"}}},
	{"GA", 11, []city{{"Atlanta", "303"}, {"Savannah", "314"}, {"Augusta", "309"}, {"Macon", "312"}}},
	{"IL", 13, []city{{"Chicago", "606"}, {"Springfield", "627"}, {"Peoria", "616"}, {"Rockford", "611"}}},
	{"IN", 7, []city{{"Indianapolis", "462"}, {"Fort Wayne", "468"}, {"Evansville", "477"}}},
	{"MA", 7, []city{{"Boston", "021"}, {"Worcester", "016"}, {"Springfield", "011"}, {"Lowell", "018"}}},
	{"MI", 10, []city{{"Detroit", "482"}, {"Grand Rapids", "495"}, {"Lansing", "489"}, {"Ann Arbor", "481"}}},
	{"MN", 6, []city{{"Minneapolis", "554"}, {"Saint Paul", "551"}, {"Duluth", "558"}, {"Rochester", "559"}}},
	{"MO", 6, []city{{"Kansas City", "641"}, {"Saint Louis", "631"}, {"Springfield", "658"}}},
	{"NC", 11, []city{{"Charlotte", "282"}, {"Raleigh", "276"}, {"Greensboro", "274"}, {"Durham", "277"}}},
	{"NJ", 9, []city{{"Newark", "071"}, {"Jersey City", "073"}, {"Trenton", "086"}, {"Camden", "081"}}},
	{"NY", 20, []city{{"New York", "100"}, {"Buffalo", "142"}, {"Rochester", "146"}, {"Albany", "122"}, {"Syracuse", "132"}}},
	{"OH", 12, []city{{"Columbus", "432"}, {"Cleveland", "441"}, {"Cincinnati", "452"}, {"Toledo", "436"}}},
	{"OR", 4, []city{{"Portland", "972"}, {"Salem", "973"}, {"Eugene", "974"}}},
	{"PA", 13, []city{{"Philadelphia", "191"}, {"Pittsburgh", "152"}, {"Harrisburg", "171"}, {"Allentown", "181"}}},
	{"TN", 7, []city{{"Nashville", "372"}, {"Memphis", "381"}, {"Knoxville", "379"}, {"Chattanooga", "374"}}},
	{"TX", 30, []city{{"Houston", "770"}, {"Dallas", "752"}, {"Austin", "787"}, {"San Antonio", "782"}, {"El Paso", "799"}}},
	{"VA", 9, []city{{"Richmond", "232"}, {"Virginia Beach", "234"}, {"Norfolk", "235"}, {"Arlington", "222"}}},
	{"WA", 8, []city{{"Seattle", "981"}, {"Spokane", "992"}, {"Tacoma", "984"}, {"Olympia", "985"}}},
	{"WI", 6, []city{{"Milwaukee", "532"}, {"Madison", "537"}, {"Green Bay", "543"}}},
}
